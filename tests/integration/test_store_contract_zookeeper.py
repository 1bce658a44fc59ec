"""The state store's contract (tests.harness.store_contract) on ZooKeeper, each test on a fresh
root; the same tests run on the in-memory store in tests/unit/test_store_contract_memory.py."""
import time

import pytest
from kazoo.client import KazooClient

from tests.harness.store_contract import StoreContract, Stores


def expire_session(store, hosts: str) -> None:
    """Expire the store's session from the server side, as a long GC pause or partition would."""
    session_id, password = store.client.client_id
    other = KazooClient(hosts=hosts, client_id=(session_id, password))
    other.start()
    other.stop()
    other.close()
    deadline = time.time() + 10
    while not store.session._session_lost.is_set() and time.time() < deadline:
        time.sleep(0.05)


class TestZkStore(StoreContract):
    @pytest.fixture
    def stores(self, open_store, stack) -> Stores:
        return Stores(open_store, lambda store: expire_session(store, stack.zk_hosts))
