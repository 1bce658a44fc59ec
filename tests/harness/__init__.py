"""What the integration tests, scripts/soak.py and the benchmark share, importable without pytest
(tests/integration/conftest.py is thin pytest glue over it). One module per concern:

  paths, names       the repository's files; names safe for topics, znodes and jobs
  stack              the one local stack (ports from ETL_ZK_PORT, ETL_KAFKA_PORT, ...)
  config_file        the one INI writer for the job (and the minimal INI of the config's unit tests)
  kafka              the one producer, watermarks, topics
  spark              the tests' SparkSession on the shared metastore
  etl_process        one `etl` subprocess (EtlProcess, run_etl, Finished)
  recovery           recover-or-run, `etl verify --deep`
  state              the job's ZooKeeper state, its lock
  warehouse_files    final and temp files on disk
  oracle             check_exactly_once and the interim invariants
  data               test events, DataSource
  campaign           the random kill campaign
  services           private broker and metastore, paused processes
  race               racing attempts of one task
  query_views        the oracle of what an analyst's query may see
  soak               the soak behind scripts/soak.py
  webhdfs_server     a WebHDFS protocol test server over a local folder
  schema_registry_server, schema_registry_store
                     a Confluent Schema Registry protocol test server (and what it keeps)
  schema_registry    the registry a test gets: that server, in-process or its own process, or a real one
  registry_payloads  Avro and Protobuf values as confluent-kafka's serializers write them
"""
