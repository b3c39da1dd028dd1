"""Compliance controls that reach the whole fleet at once: the stop button and maintenance
windows."""
