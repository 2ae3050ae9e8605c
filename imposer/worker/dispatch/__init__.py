"""Dispatch: a vetted message becomes a running job, or waits (parked, deferred, held)."""
