module kubefedctl.testenv/inventory-consumer

go 1.25.0

require sigs.k8s.io/cluster-inventory-api v0.1.2
