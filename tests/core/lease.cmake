# core/lease: the lease manager and the lease protocol's requests, driven
# against the simulated DynamoDB store (models/) in a small deterministic world.
leaseproof_test(core_lease_tests
  SOURCES
    lease_requests_test.cpp
    lease_manager_test.cpp
  DEPENDS leaseproof::lease leaseproof::models
  LABELS unit)

leaseproof_test(core_lease_property_tests
  SOURCES
    lease_manager_property_test.cpp
    lease_parse_property_test.cpp
  DEPENDS leaseproof::lease leaseproof::models
  LABELS property)
