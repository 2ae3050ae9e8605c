"""Settle: a finished job's release, plate and message, and its slot's next owner."""
