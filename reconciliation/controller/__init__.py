"""The controller: the only code that knows the reconcile queue (triggers, the work queue and
its lock and renewal, backoff, requeues), as controller-runtime's controller is."""
