//! RabbitMQ adapter: topology, publishing with confirms, consuming, retry and dead-letter paths.
