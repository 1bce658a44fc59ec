"""The state store's contract (tests.harness.store_contract) on the in-memory store; the same
tests run on ZooKeeper in tests/integration/test_store_contract_zookeeper.py."""
import pytest

from tests.harness.memory_store import MemoryState, MemoryStore
from tests.harness.store_contract import StoreContract, Stores


def _expire(store) -> None:
    store.session.expire()


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def stores(self) -> Stores:
        state = MemoryState()
        return Stores(lambda: MemoryStore(state), _expire)
