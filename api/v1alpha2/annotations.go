package v1alpha2

// AnnotationNodeLostSince, on an EtcdMember, is when the operator first saw the node its data
// is pinned to gone (RFC 3339): spec.nodeLoss.gracePeriodSeconds counts from it, across
// operator restarts. The operator writes it and removes it when the node is back or the
// member serves again.
const AnnotationNodeLostSince = "etcd-operator.cozystack.io/node-lost-since"
