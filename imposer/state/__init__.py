"""imposer's shared state in DynamoDB: leases and counters, job records, tenants.

Each store owns one table's item layout; nothing above reads raw items.
"""
