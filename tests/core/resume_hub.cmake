# core/resume hub (publisher): unit tests of every resume rule, the bounded
# queue and the deadlines, and a stateful property test against a simple model.
leaseproof_test(core_resume_hub_tests
  SOURCES resume_hub_test.cpp
  DEPENDS leaseproof::resume
  LABELS unit)

leaseproof_test(core_resume_hub_property_tests
  SOURCES resume_hub_property_test.cpp
  DEPENDS leaseproof::resume
  LABELS property)
