# SQS FIFO model, autoscaler and rolling deploy (models/ fleet pieces).
leaseproof_test(models_fleet_test
  SOURCES
    sqs_test.cpp
    autoscaler_test.cpp
    deploy_test.cpp
  DEPENDS leaseproof::models
  LABELS unit)
