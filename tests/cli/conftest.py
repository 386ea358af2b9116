"""Make the shared scenario test helpers importable (tests run with --import-mode=importlib)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenario"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fuzz_cases, the hostile-input generator
