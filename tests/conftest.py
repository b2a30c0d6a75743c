"""Test-session setup shared by every test module.

The proof cache signs its entries with a key kept outside the cache folder (``verify_tf.cache``): the tests use
a fixed one from the environment, so that no test writes a key file into the user's config folder (the tests
of the key file itself point ``XDG_CONFIG_HOME`` at a temporary folder).
"""

import os


def pytest_configure(config):
    os.environ.setdefault("VERIFY_TF_CACHE_SECRET", "verify-tf test session")
