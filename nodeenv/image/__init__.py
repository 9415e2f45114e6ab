"""The suite's container image: built here with podman from the Containerfile (`make image`), kept in
one private store under build/podman that everything starting containers from it uses."""
