"""The application: `App` wires the parts together and runs them; `configs` builds each part's values from `Settings`."""

from bicameral.app.configs import (
    back_config,
    claude_code_chamber_config,
    claude_code_config,
    configured_channels,
    fire_retry,
    front_config,
    gate_config,
    lane_config,
    matrix_config,
    model_config,
    offline_config,
    run_sandbox,
    send_limits,
    single_config,
    telegram_config,
    web_fetch_tool,
    web_search_tool,
)
from bicameral.app.data import prepare_data_dir
from bicameral.app.wiring import App

__all__ = [
    "App",
    "back_config",
    "claude_code_chamber_config",
    "claude_code_config",
    "configured_channels",
    "fire_retry",
    "front_config",
    "gate_config",
    "lane_config",
    "matrix_config",
    "model_config",
    "offline_config",
    "prepare_data_dir",
    "run_sandbox",
    "send_limits",
    "single_config",
    "telegram_config",
    "web_fetch_tool",
    "web_search_tool",
]
