"""Operator reports over imposer's own records: stats, the licence rule, why a job waits."""
