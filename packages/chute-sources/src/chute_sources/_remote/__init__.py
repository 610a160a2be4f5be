"""Reading objects in cloud buckets (`s3://`, `gs://`): URLs, client, retries, cache.

Internal to chute_sources; the public names are re-exported by the package.
"""
