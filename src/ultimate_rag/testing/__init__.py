"""Reusable contract test suites for the ports (in the spirit of Haystack's
``haystack/testing/document_store.py``): an implementation's test class subclasses the mixin,
provides one fixture, and runs every contract case against its real backend.

    class TestMyStorage(ObjectStorageContract):
        @pytest.fixture
        async def object_storage(self): ...

A backend that cannot honour a case must override it with an explicit, explained failure or
``pytest.xfail`` — never a silent skip. ``servers`` starts real backend servers for the tests.
"""

from .contracts import EmbedderContract, ObjectStorageContract, VectorStoreContract

__all__ = ["EmbedderContract", "ObjectStorageContract", "VectorStoreContract"]
