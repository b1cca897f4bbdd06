"""The workspace backends that run on AKS (MIG slices, namespaces), registered into
workspaces.backends from clusters.apps.ClustersConfig.ready()."""
