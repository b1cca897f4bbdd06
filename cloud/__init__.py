"""Azure adapter: the only package that talks to Azure SDKs.

Takes plain values, returns frozen dataclasses, raises cloud.errors.CloudError.
"""
