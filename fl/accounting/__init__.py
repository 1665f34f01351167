"""Privacy accounting: per-user ledgers of releases and what they add up to."""

from .ledger import PrivacyLedger

__all__ = ["PrivacyLedger"]
