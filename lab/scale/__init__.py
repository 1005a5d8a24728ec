"""The scale lab: many light ranks on one host and emulated hosts (network namespaces),
measured and fitted to a cost model. See lab/records/scaling.md."""
