"""The pure quota arithmetic: Kafka's precedence of quota entities (KIP-55), the sharing
key each one gives, the sampled rate and its throttle time, windows expiring, the token
bucket of controller mutations, and the manager's snapshot handling."""

from __future__ import annotations

import pytest

from odradek.broker.quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaManager,
    RateTracker,
    TokenBucket,
    candidates,
    resolve_quota,
)
from odradek.controller.image import QuotaEntity

U, C = "alice", "app"

# KIP-55's table, highest precedence first, with the sharing key each gives.
TABLE: list[tuple[QuotaEntity, tuple[str, str]]] = [
    ((("client-id", C), ("user", U)), (U, C)),  # /users/<u>/clients/<c>
    ((("client-id", None), ("user", U)), (U, C)),  # /users/<u>/clients/<default>
    ((("user", U),), (U, "")),  # /users/<u>
    ((("client-id", C), ("user", None)), (U, C)),  # /users/<default>/clients/<c>
    ((("client-id", None), ("user", None)), (U, C)),  # /users/<default>/clients/<default>
    ((("user", None),), (U, "")),  # /users/<default>
    ((("client-id", C),), ("", C)),  # /clients/<c>
    ((("client-id", None),), ("", C)),  # /clients/<default>
]


def test_candidates_follow_kip_55() -> None:
    assert candidates(U, C) == TABLE


def test_each_entity_wins_over_every_one_below_it() -> None:
    quotas = {entity: {PRODUCER_BYTE_RATE: float(i)} for i, (entity, _) in enumerate(TABLE)}
    for i, (entity, sharing) in enumerate(TABLE):
        resolved = resolve_quota(quotas, PRODUCER_BYTE_RATE, U, C)
        assert resolved is not None
        assert (resolved.entity, resolved.key, resolved.value) == (entity, sharing, float(i))
        del quotas[entity]
    assert resolve_quota(quotas, PRODUCER_BYTE_RATE, U, C) is None


def test_each_key_resolves_on_its_own_and_other_names_do_not_match() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {
        (("client-id", C), ("user", U)): {CONSUMER_BYTE_RATE: 1.0},
        (("user", None),): {PRODUCER_BYTE_RATE: 2.0},
        (("user", "bob"),): {PRODUCER_BYTE_RATE: 3.0},
        (("ip", None),): {"connection_creation_rate": 4.0},
    }
    produce = resolve_quota(quotas, PRODUCER_BYTE_RATE, U, C)
    assert produce is not None and (produce.value, produce.key) == (2.0, (U, ""))
    fetch = resolve_quota(quotas, CONSUMER_BYTE_RATE, U, C)
    assert fetch is not None and fetch.value == 1.0
    assert resolve_quota(quotas, CONSUMER_BYTE_RATE, U, "other") is None
    bob = resolve_quota(quotas, PRODUCER_BYTE_RATE, "bob", C)
    assert bob is not None and bob.value == 3.0
    assert resolve_quota(quotas, REQUEST_PERCENTAGE, U, C) is None


# The sampled rate ------------------------------------------------------------------


def test_a_first_burst_is_spread_over_the_minimum_span() -> None:
    tracker = RateTracker(1000)
    # 20000 bytes at once: the span counts as 10 full windows, so 2000 B/s, and the
    # client must wait (2000 - 1000) / 1000 * 10 s.
    assert tracker.record(0, 20_000) == 10_000
    assert tracker.rate(0) == 2000


def test_within_the_quota_there_is_no_throttle() -> None:
    tracker = RateTracker(1000)
    assert tracker.record(0, 10_000) == 0  # exactly at the quota
    # Half a second on, the span is 10.5 s: one more byte is still under the quota.
    assert tracker.record(500, 1) == 0
    assert RateTracker(1000).record(0, 10_001) == 1  # (1000.1 - 1000) / 1000 * 10 s


def test_throttle_values_follow_kafkas_formula() -> None:
    tracker = RateTracker(100)
    assert tracker.record(0, 500) == 0  # 50 B/s
    assert tracker.record(5_000, 1000) == 5_000  # 1500 B over 10 s: (150-100)/100*10s
    # Past ten full windows the span is the real time: 1600 B over 10.5 s, so
    # (152.38 - 100) / 100 * 10.5 s.
    assert tracker.record(10_500, 100) == 5_500
    assert tracker.span_ms(10_500) == 10_500
    assert tracker.rate(10_500) == pytest.approx(1600 / 10.5)


def test_a_throttle_is_bounded_by_the_whole_window() -> None:
    tracker = RateTracker(10)
    assert tracker.record(0, 1_000_000) == 11_000
    bounded = RateTracker(10, max_throttle_ms=1000)
    assert bounded.record(0, 1_000_000) == 1000


def test_windows_expire_after_the_sample_window() -> None:
    tracker = RateTracker(1000)
    tracker.record(0, 30_000)
    assert tracker.throttle_ms(10_999) > 0
    # At 11 s the first window is as old as all eleven: forgotten.
    assert tracker.rate(11_000) == 0
    assert tracker.record(11_000, 5_000) == 0


def test_windows_stay_aligned_and_only_eleven_are_kept() -> None:
    tracker = RateTracker(1e9)
    for t in range(0, 15_000, 700):
        tracker.record(t, 1)
    starts = [start for start, _ in tracker._windows]
    assert all(start % 1000 == 0 for start in starts)
    assert len(starts) <= 11
    assert starts == sorted(starts)
    # The oldest window kept is no older than the eleven-window span.
    assert 14_700 - starts[0] < 11_000


def test_a_changed_quota_applies_to_the_samples_already_taken() -> None:
    tracker = RateTracker(1000)
    tracker.record(0, 10_000)
    tracker.quota = 500
    assert tracker.throttle_ms(0) == 10_000


# Controller mutations ----------------------------------------------------------------


def test_the_token_bucket_allows_a_burst_then_throttles_until_zero() -> None:
    bucket = TokenBucket(2)  # a burst of 2 * 11 s = 22 mutations
    assert bucket.record(0, 22) == 0
    assert bucket.record(0, 4) == 2000  # 4 tokens short at 2 a second
    assert bucket.throttle_ms(1000) == 1000
    assert bucket.throttle_ms(2000) == 0
    # Refilled, never past the burst.
    assert bucket.record(100_000, 22) == 0
    assert bucket.record(100_000, 1) == 500


# The manager -------------------------------------------------------------------------


def quotas_for(**values: float) -> dict[QuotaEntity, dict[str, float]]:
    return {(("user", None),): dict(values)}


def test_the_manager_throttles_each_kind_against_its_own_key() -> None:
    manager = QuotaManager(
        quotas_for(
            producer_byte_rate=1000,
            consumer_byte_rate=2000,
            request_percentage=10,
            controller_mutation_rate=1,
        )
    )
    assert manager.produce(U, C, 20_000, 0) == 10_000
    assert manager.fetch(U, C, 20_000, 0) == 0  # 2000 B/s is the fetch quota
    # 2 s of loop time in 10 s is 20% of the loop: throttled, by at most one window.
    assert manager.request_time(U, C, 2_000_000_000, 0) == 1000
    assert manager.request_time("bob", C, 1_000_000_000, 0) == 0  # bob has his own
    assert manager.controller_mutations(U, C, 12, 0) == 1000


def test_a_user_default_gives_each_user_one_allowance_for_all_its_clients() -> None:
    manager = QuotaManager(quotas_for(producer_byte_rate=1000))
    assert manager.produce(U, "a", 10_000, 0) == 0
    assert manager.produce(U, "b", 10_000, 0) == 10_000  # alice's clients share
    assert manager.produce("bob", "a", 10_000, 0) == 0  # bob does not
    assert manager.tracker(PRODUCER_BYTE_RATE, (U, "")) is not None


def test_no_quota_means_no_throttle_and_no_tracker() -> None:
    manager = QuotaManager({})
    assert manager.produce(U, C, 10**12, 0) == 0
    assert manager.tracker(PRODUCER_BYTE_RATE, (U, "")) is None


def test_update_rebuilds_only_when_the_snapshot_changes() -> None:
    first = quotas_for(producer_byte_rate=1000)
    manager = QuotaManager(first)
    manager.produce(U, C, 10_000, 0)
    manager.update(first)
    assert manager.quota(PRODUCER_BYTE_RATE, U, C) is not None
    # A new snapshot: the resolution is redone, the samples kept, the new value used.
    manager.update(quotas_for(producer_byte_rate=500))
    assert manager.quotas is not first
    assert manager.produce(U, C, 0, 0) == 10_000
    manager.update({})
    assert manager.produce(U, C, 10**9, 0) == 0
    quota = manager.quota(CONTROLLER_MUTATION_RATE, U, C)
    assert quota is None


def test_idle_trackers_expire() -> None:
    manager = QuotaManager(quotas_for(producer_byte_rate=1000))
    manager.produce(U, C, 1, 0)
    assert manager.expire_idle(3_599_999) == 0
    assert manager.expire_idle(3_600_000) == 1
    assert manager.tracker(PRODUCER_BYTE_RATE, (U, "")) is None


def test_connection_rate_is_per_ip_with_the_ip_default_below_an_exact_ip() -> None:
    quotas: dict[QuotaEntity, dict[str, float]] = {
        (("ip", None),): {"connection_creation_rate": 1.0},
        (("ip", "10.0.0.9"),): {"connection_creation_rate": 100.0},
    }
    manager = QuotaManager(quotas)
    # 1 a second over the ten seconds the first samples span: ten connections pass.
    assert [manager.connection("10.0.0.1", 0) for _ in range(10)] == [0] * 10
    assert manager.connection("10.0.0.1", 0) > 0
    # Each ip counts its own; the exact entity wins over the default.
    assert manager.connection("10.0.0.2", 0) == 0
    assert all(manager.connection("10.0.0.9", 0) == 0 for _ in range(500))
    assert QuotaManager({}).connection("10.0.0.1", 0) == 0
