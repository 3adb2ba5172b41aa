"""Web search: typed hits from a search backend, ddgs by default, loaded on the first search."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)


class SearchFailed(Exception):
    """The search could not be done (rate limit, no network, timeout); the message says so in a sentence."""


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    snippet: str


class Searcher(Protocol):
    """Anything that turns a query into hits; tests pass a fake, the app the ddgs adapter."""

    async def search(self, query: str, max_results: int) -> list[SearchHit]: ...


def hit_from_ddgs(row: Mapping[str, Any]) -> SearchHit | None:
    """One ddgs text result (`title`, `href`, `body`) as a hit; None when it has no address."""
    url = str(row.get("href") or row.get("url") or "").strip()
    if not url:
        return None
    return SearchHit(title=str(row.get("title") or "").strip(), url=url, snippet=str(row.get("body") or "").strip())


class DdgsSearcher:
    """Searches through the ddgs metasearch library, in a worker thread (it is synchronous)."""

    def __init__(self, timeout_seconds: float = 15.0, region: str = "wt-wt") -> None:
        self.timeout_seconds = timeout_seconds
        self.region = region

    async def search(self, query: str, max_results: int) -> list[SearchHit]:
        """Hits for `query`, at most `max_results`; an empty list when nothing matched; SearchFailed otherwise."""
        try:
            rows = await asyncio.wait_for(asyncio.to_thread(self._search, query, max_results), self.timeout_seconds + 5)
        except TimeoutError:
            raise SearchFailed(f"the search did not finish within {self.timeout_seconds:g}s; try again later") from None
        hits = [hit for row in rows if (hit := hit_from_ddgs(row)) is not None]
        return hits[:max_results]

    def _search(self, query: str, max_results: int) -> list[dict[str, Any]]:
        # Imported here: ddgs and its HTTP client are heavy and only a search needs them.
        from ddgs import DDGS
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        try:
            return DDGS(timeout=max(1, round(self.timeout_seconds))).text(query, region=self.region, max_results=max_results)
        except RatelimitException:
            raise SearchFailed("the search service is rate limiting us; try again in a minute") from None
        except TimeoutException:
            raise SearchFailed(f"the search did not finish within {self.timeout_seconds:g}s; try again later") from None
        except DDGSException as exc:
            if "no results" in str(exc).lower():
                return []
            log.info("search failed: %r", exc)
            raise SearchFailed("the search service could not be reached (no network, or it refused); try again later") from None
        except OSError as exc:
            log.info("search failed: %r", exc)
            raise SearchFailed("the search service could not be reached (no network?); try again later") from None
