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
  return {status: {configMaps: observed}, children: [child]};
}
