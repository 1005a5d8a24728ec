"""The lab: measurements of tfring's design, not of the product a user runs. The scale
lab (lab/scale/), A/B tools comparing two builds (ab_builds.py, ring_ab.cc), the dated
result files (lab/results/) and the dated records of each run (lab/records/). See
lab/README.md."""
