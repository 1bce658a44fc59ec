"""The state store's contract (tests.harness.store_contract) on ZooKeeper, each test on a fresh
root; the same tests run on the in-memory store in tests/unit/test_store_contract_memory.py."""

import pytest

from tests.harness.state import expire_session
from tests.harness.store_contract import StoreContract, Stores


class TestZkStore(StoreContract):
    @pytest.fixture
    def stores(self, open_store, stack) -> Stores:
        return Stores(open_store, lambda store: expire_session(store, stack.zk_hosts))
