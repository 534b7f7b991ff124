"""Fixtures of the retention tests live in ``retention_world`` (a uniquely named module the tests import)."""

from retention_world import blob_store, chdb_dir, index, local_store, make_world, own_chdb_dir, signer, trust

__all__ = ["blob_store", "chdb_dir", "index", "local_store", "make_world", "own_chdb_dir", "signer", "trust"]
