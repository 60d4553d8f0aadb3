"""Django's Redis cache, keeping one client per connection pool.

django.core.cache.backends.redis builds a new redis.Redis around the pool for
every cache call, and redis-py's constructor fills its table of response
callbacks each time (~170 entries): with four rate-limit calls per API request
that was ~0.6 ms of Python per request, on the path every search takes. A
redis.Redis is safe to share between threads (each command borrows a connection
from the pool), and Django keeps one cache object per thread anyway.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class _OneClientPerPool(RedisCacheClient):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        index = self._get_connection_pool_index(write)
        client = self._clients.get(index)
        if client is None:
            client = self._clients[index] = self._client(connection_pool=self._get_connection_pool(write))
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = _OneClientPerPool
