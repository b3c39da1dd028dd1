"""The client's version, also sent as its User-Agent."""

VERSION = "0.1.0"
