"""Flower server side: the ServerApp, the release-training strategy and custom-strategy loading."""

from .release_training import ReleaseTraining

__all__ = ["ReleaseTraining"]
