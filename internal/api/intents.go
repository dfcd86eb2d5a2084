package api

import (
	"errors"
	"net/http"

	"github.com/xdp5g/xdp5g/internal/classify/intent"
)

// Intents is the body of GET /api/v1/intents.
type Intents struct {
	Intents []intent.Status `json:"intents"`
}

// asIntentError is a refused intent as the API answers it.
func asIntentError(err error) error {
	if errors.Is(err, intent.ErrNoIntent) {
		return &Error{Status: http.StatusNotFound, Msg: err.Error()}
	}
	return err
}

// postIntent carries out an intent document: 201 and the intent for an
// INSERT, 200 and the intent removed for a DELETE.
func (s *server) postIntent(w http.ResponseWriter, r *http.Request) (int, any, error) {
	body, err := readBody(w, r)
	if err != nil {
		return 0, nil, err
	}
	in, deleted, err := s.classifier.Intents.Apply(body)
	if err != nil {
		return 0, nil, asIntentError(err)
	}
	if deleted {
		return http.StatusOK, intent.Status{ID: in.ID, Action: in.Kind, Document: in.Document}, nil
	}
	st, err := s.classifier.Intents.Get(in.ID)
	return http.StatusCreated, st, err
}

func (s *server) listIntents(w http.ResponseWriter, r *http.Request) (int, any, error) {
	list, err := s.classifier.Intents.List()
	return http.StatusOK, Intents{Intents: list}, err
}

func pathIntentID(r *http.Request) (uint32, error) { return pathID(r, "an intent ID") }

func (s *server) getIntent(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathIntentID(r)
	if err != nil {
		return 0, nil, err
	}
	st, err := s.classifier.Intents.Get(id)
	return http.StatusOK, st, asIntentError(err)
}

func (s *server) deleteIntent(w http.ResponseWriter, r *http.Request) (int, any, error) {
	id, err := pathIntentID(r)
	if err != nil {
		return 0, nil, err
	}
	if err := s.classifier.Intents.Delete(id); err != nil {
		return 0, nil, asIntentError(err)
	}
	return http.StatusNoContent, nil, nil
}
