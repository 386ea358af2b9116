"""Reading the YAML a user gives, bounded and checked before anything is built from it: the limits (`limits`), one
pass over libyaml's events (`reader`; what it finds: `document`; what an alias repeats: `aliases`), a named file
read through opsim.safe_io (`files`) and the wording of the problems found (`messages`). It sits below every
package that reads YAML (calibration, scenario, sweeps), so each reads through this one reader."""
