package botrunner

import "github.com/dop251/goja"

// dataObject is a plain object the runner is building for a bot (its event, JSON input): it has
// no prototype until done, so each add makes an own enumerable data property, as JSON.parse and
// an object literal do. An assignment to an object that already had Object.prototype would run a
// setter, or fail on a read-only property, that the bot put there (in a warm awslambda instance
// that outlives the run that put it), and a "__proto__" key would replace the prototype. It is
// also cheaper: an add does not look the name up along the prototype chain.
type dataObject struct{ obj *goja.Object }

func (x *execution) newDataObject() dataObject {
	return dataObject{obj: x.rt.CreateObject(nil)}
}

// add sets key to v; a later add of the same key replaces it, as in JSON.parse.
func (o dataObject) add(key string, v goja.Value) {
	_ = o.obj.Set(key, v)
}

// done gives the object the realm's own Object.prototype (not whatever the bot's global
// Object names now) and returns it.
func (o dataObject) done(x *execution) *goja.Object {
	if x.objectProto == nil {
		x.objectProto = x.rt.NewObject().Prototype()
	}
	_ = o.obj.SetPrototype(x.objectProto)
	return o.obj
}
