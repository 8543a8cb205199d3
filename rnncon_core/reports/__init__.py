"""The reports behind ``rnncon report ...``: one module per report, each with one ``build_*``
function that measures, writes its files (JSON / CSV / markdown) under ``out_dir`` and returns
the report as a dict.

    coverage     build_coverage     Figures 6, 7/8 and 12, §5.2's threshold selection
    criteria     build_criteria     which criteria find faults (Kendall tau, FSE 2020)
    generation   build_generation   Tables 2-4 and Figure 10's t-SNE data
    text         build_text         the text (IMDB) generators
    retraining   build_retraining   Tables 5-6, Figures 11, 13, 14, §7, pollution detection

Every file goes through ``writer.write_files`` (one JSON encoder, atomic writes, and the
report's ``provenance.json``: when, which commit, which package versions). The modules load
nothing heavy until a report is built.
"""
