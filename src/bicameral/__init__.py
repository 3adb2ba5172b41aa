"""bicameral: a two-chamber personal assistant for chat."""

from bicameral.imports import skip_never_used

skip_never_used()
