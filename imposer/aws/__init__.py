"""The AWS adapters: the only home of boto3.

``session`` makes clients and turns botocore's failures into imposer's own
errors; ``sqs``, ``dynamodb`` and ``s3`` are one adapter per service;
``expressions`` builds DynamoDB update expressions; ``provision`` is
`imposer init`; ``localstack`` is the embedded moto stack of `imposer local`,
with ``localindex`` (and its ``localpage``) giving its Queries DynamoDB's cost.
"""
