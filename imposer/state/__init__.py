"""imposer's shared state in DynamoDB: leases and counters, job records, tenants; and in S3
a succeeded job's plate (``plates``).

Each store owns one table's item layout; nothing above reads raw items.
"""
