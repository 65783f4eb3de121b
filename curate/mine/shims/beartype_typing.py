"""Stand-in for ``beartype.typing``: the standard library's ``typing`` names."""

from typing import (Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Set, Tuple,
                    Type, Union)
