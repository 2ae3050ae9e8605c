"""The embedded local AWS stack of `imposer local` and the tests: never used in production.

``stack`` runs moto's server with serializable DynamoDB; ``index`` (with its
``page``) gives its Queries DynamoDB's cost shape, ``txn`` its transactions'.
"""
