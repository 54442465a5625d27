# core/resume client (subscriber) and sink-recording requests; the recording
# tests apply the requests to the simulated DynamoDB store.
leaseproof_test(core_resume_client_tests
  SOURCES
    resume_client_test.cpp
    resume_recording_test.cpp
  DEPENDS leaseproof::resume leaseproof::models
  LABELS unit)

leaseproof_test(core_resume_session_tests
  SOURCES resume_session_test.cpp
  DEPENDS leaseproof::resume leaseproof::models
  LABELS unit)
