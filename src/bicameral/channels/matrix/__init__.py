"""The Matrix channel (matrix-nio): imported only when BICAMERAL_MATRIX_HOMESERVER is set."""

from .channel import MatrixChannel, MatrixConfig

__all__ = ["MatrixChannel", "MatrixConfig"]
