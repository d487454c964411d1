"""Scenarios: frozen dataclasses loaded from TOML, with dotted overrides and strict validation.

A scenario file has one table per concern ([run], [channel], [link], [devices], [scheduler],
[learning]) plus two optional tables that expand one file into several runs:
[variants.NAME] (dotted overrides per named variant, e.g. lyapunov vs uniform) and [sweep]
(grids of values). Unknown keys, wrong types and out-of-range values raise ConfigError naming the
field path, the value and what is allowed.

Five tables name a part (see wirelessfl.plugins): ``protocol.name``, ``scheduler.name``,
``learning.algorithm``, ``channel.model`` and ``devices.compute``. The part's own options come from the table's
``options`` sub-table, or, for options the part declares in its ``Options`` dataclass, from the
table itself (``scheduler.V`` is ``scheduler.options.V``). Options the named part does not take are
an error, except after an override that names another part (a variant, a grid value): the new part
keeps the options it shares with the old one and drops the others. The learning table also names the
model, the dataset and the partition; their options are its sub-tables ``model_options``,
``dataset_options`` and ``partition_options``. This module does not import
torch.
"""
from .build import from_dict, load_scenario
from .overrides import parse_value
from .network_tables import HierarchyConfig, NetworkConfig
from .tables import (ChannelConfig, DevicesConfig, Facts, LearningConfig, LinkConfig, PluginOptions, ProtocolConfig,
                     RunConfig, Scenario, SchedulerConfig)
from .writing import dumps, to_dict
from ..fields import ConfigError, FilePath, Power, option

__all__ = ["ChannelConfig", "ConfigError", "DevicesConfig", "Facts", "FilePath", "HierarchyConfig", "LearningConfig",
           "LinkConfig", "NetworkConfig", "Power", "PluginOptions", "ProtocolConfig", "RunConfig", "Scenario", "SchedulerConfig", "dumps", "from_dict", "load_scenario",
           "option", "parse_value", "to_dict"]
