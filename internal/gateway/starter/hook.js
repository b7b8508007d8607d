// A Metacontroller sync hook: the request holds the parent object and the children
// it has now; the answer is the parent's status and the children it should have.
// Use it as a CompositeController's sync hook, with ConfigMaps as its child resource.
function sync(request) {
  const parent = request.parent;
  const name = parent.metadata.name;
  const message = (parent.spec && parent.spec.message) || "hello";
  const observed = Object.keys((request.children || {})["ConfigMap.v1"] || {}).length;
  console.log("syncing", name, "with", observed, "ConfigMap(s)");
  const child = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {name: name + "-message"},
    data: {message: message},
  };
  // Events are recorded on the parent, where `kubectl describe` shows them: type
  // Normal or Warning, reason in UpperCamelCase, at most 10 an answer. (Upstream
  // Metacontroller ignores them, and refuses them under responseUnMarshallMode strict.)
  const events = observed === 0
    ? [{type: "Normal", reason: "CreatingConfigMap", message: "creating ConfigMap " + child.metadata.name}]
    : [];
  return {status: {configMaps: observed}, children: [child], events: events};
}
