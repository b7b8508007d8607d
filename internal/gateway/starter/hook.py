# A Metacontroller sync hook: the request holds the parent object and the children
# it has now; the answer is the parent's status and the children it should have.
# Use it as a CompositeController's sync hook, with ConfigMaps as its child resource.


def sync(request):
    parent = request["parent"]
    name = parent["metadata"]["name"]
    message = parent.get("spec", {}).get("message", "hello")
    observed = request.get("children", {}).get("ConfigMap.v1", {})
    print("syncing", name, "with", len(observed), "ConfigMap(s)")
    child = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name + "-message"},
        "data": {"message": message},
    }
    # Events are recorded on the parent, where `kubectl describe` shows them: type
    # Normal or Warning, reason in UpperCamelCase, at most 10 an answer. (Upstream
    # Metacontroller ignores them, and refuses them under responseUnMarshallMode strict.)
    events = []
    if not observed:
        events.append({"type": "Normal", "reason": "CreatingConfigMap",
                       "message": "creating ConfigMap " + child["metadata"]["name"]})
    return {"status": {"configMaps": len(observed)}, "children": [child], "events": events}
