"""The AWS adapters: the only home of boto3.

``session`` makes clients and turns botocore's failures into imposer's own
errors; ``sqs``, ``dynamodb`` and ``s3`` are one adapter per service;
``expressions`` builds DynamoDB update expressions; ``tables`` the table
layouts of `imposer init`. The embedded local stack lives in
``imposer.dev.localstack``.
"""
