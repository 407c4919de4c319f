"""Language models with GNNs on text-attributed graphs (UniTG, issue 26): the LM
(:mod:`.lm`), its inputs (:mod:`.tokens`), the Lazy Tuner (:mod:`.lazy_tuner`), the
Modality Collaborator (:mod:`.collaborator`), the trainers (:mod:`.lm_trainer`,
:mod:`.gnn`, :mod:`.unitg`) on :func:`graphpipe.train.loop.fit`, the TAPE / GLEM
baselines (:mod:`.baselines`) and their construction from a store (:mod:`.build`)."""
