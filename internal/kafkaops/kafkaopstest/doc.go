// Package kafkaopstest gives each test a Kafka of its own: an in-process
// kfake cluster by default, or, when PAYCB_TEST_KAFKA_BROKERS names a real
// cluster (the Apache Kafka engine suite, scripts/engines/kafka.sh), topics
// under a name prefix unique to the test on that cluster, so that tests
// sharing one broker never see each other's messages, groups or offsets.
// It is for tests only and never touches a topic it did not create.
package kafkaopstest
