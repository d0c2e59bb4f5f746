"""tempora-client: the typed Python SDK of Tempora's public HTTP surface."""

from .client import RetryPolicy, Tempora
from .events import ServerEvent
from .generated import models
from .problems import InvalidAnswer, TemporaProblem, retry_after_seconds

__all__ = ["InvalidAnswer", "RetryPolicy", "ServerEvent", "Tempora", "TemporaProblem", "models", "retry_after_seconds"]
