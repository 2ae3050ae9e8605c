"""Receive: the SQS long poll, what to ask for next, and the vetting of each message."""
