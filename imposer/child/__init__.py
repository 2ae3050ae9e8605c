"""What runs inside a pool process: download, impose, upload, report an Outcome.

It touches S3 only, through ``imposer.aws.s3``; SQS and the lease state
belong to the parent.
"""
